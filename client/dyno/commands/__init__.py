"""One module per `dyno` subcommand, each with its options and its ``run``."""
