"""The library lookup (issue 18, STD-AI-01): an offline, ranked search of the
installed libraries' own source, read statically with `ast` and kept in SQLite
FTS5 (`.gbr/library.db`).

    extract   one source file -> definitions, imports, `__all__`   [pure]
    exports   a distribution's modules -> public import paths     [pure]
    mention   what a message names as code (pre-lookup, misses)  [pure]
    words     identifier splitting, question words, PEP 503 names [pure]
    hit       one search hit                                     [pure]
    rank      question -> FTS5 query; rows -> ranked hits         [pure]
    present   hit lines, the pre-lookup context and status line   [pure]
    sources   plain-text packages of other ecosystems
    environments, build, store, index   reading installs, building rows, SQLite
    lookup    the node's use: opening from a profile, the pre-lookup
"""
