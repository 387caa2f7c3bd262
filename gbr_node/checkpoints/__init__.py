"""Checkpoints and undo (issue 31, GBR-UNDO-01): the prior state of every path the
node changes, kept before the change, and the person's way back.

    plan   states, entries, what an undo does, what is evicted    [pure]
    store  blobs and the SQLite index under .gbr/; undo           (I/O)
"""
