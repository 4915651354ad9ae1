"""What the trainer watches while it trains: collapse of the iBOT teacher and the teacher's k-NN accuracy."""
