"""What runs inside the dry run's sandboxed child: the bootstrap that starts the script, how the
stand-ins are swapped into its unmodified `art`, the loopback-only network, the size flags'
caps, and the count of which of the script's own functions ran."""
