"""The heavier commands, each loaded only when it runs (see `cli.LAZY_COMMANDS`)."""
