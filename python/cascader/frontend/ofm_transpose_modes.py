"""The Ethos-U85's OFM transpose modes (OFM_PRECISION's transpose field), shared by the
lowering that chooses one (`lower_ofm_transpose`) and the emitter that writes the stored map's
tiles and strides (`emit.ethos_u85`); a module of its own so that neither imports the other."""

# Mode by stored order: stored axis k is computed axis order[k].
TRANSPOSE_MODES = {(1, 0, 2): 1, (0, 2, 1): 2, (1, 2, 0): 3, (2, 0, 1): 6, (2, 1, 0): 7}
# Stored order by mode; 0, no transpose, is the mode of an OFM written reversed instead
# (`lower_reverse`), which keeps the field in its registers as the mark of an OFM written out of order.
STORED_ORDER = {0: (0, 1, 2), **{mode: order for order, mode in TRANSPOSE_MODES.items()}}
