"""The model room: the decoder (which never names a scheme), attention backends, spans and windows, logit scales,
checkpoints and the device; the schemes are pebench.model.pe, the layer patterns pebench.model.patterns."""
