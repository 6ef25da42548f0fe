"""The emitter: weight and scale streams, register command streams (the forward path's last
stage before packaging)."""
