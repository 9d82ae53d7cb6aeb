"""Chat adapters: they translate platform events to InboundMessage and OutboundMessage, nothing more."""
