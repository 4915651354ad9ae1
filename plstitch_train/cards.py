"""Model cards: old import path; the code is in plstitch_train/publishing/ (`publishing.cards`).
Kept because docs/baselines.md and model_cards/README.md named `plstitch_train.cards`.
"""

from plstitch_train.publishing.cards import (
    MODEL_CARDS_DIR,
    PAPER_RESULTS_PATH,
    TASK_TYPE,
    TEMPLATE_PATH,
    CardInfo,
    architecture_text,
    card_licence,
    dataset_display_name,
    eval_results_from_paper,
    eval_results_from_results,
    eval_results_table,
    load_paper_results,
    render_card,
    render_reference_cards,
    reported_table,
)

__all__ = [
    "MODEL_CARDS_DIR",
    "PAPER_RESULTS_PATH",
    "TASK_TYPE",
    "TEMPLATE_PATH",
    "CardInfo",
    "architecture_text",
    "card_licence",
    "dataset_display_name",
    "eval_results_from_paper",
    "eval_results_from_results",
    "eval_results_table",
    "load_paper_results",
    "render_card",
    "render_reference_cards",
    "reported_table",
]
