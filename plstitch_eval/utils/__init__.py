"""Small shared helpers: stderr console and progress bars, atomic writes, device and precision."""
