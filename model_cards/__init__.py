"""Shipped data, no code: the tiny model, the card template and the paper's numbers (installed as
`plstitch_eval.model_cards`; read through `plstitch_eval.resources`)."""
