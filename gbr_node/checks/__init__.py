"""Write checks (issue 17, UBQ-DEV-02, UNW-AI-01 / STD-DEV-01): format on save and
silent self-correction after an answer's writes. Every module here is pure; the
programs run through `tools.checkrunner.CheckRunner`, beside run_command.

    builtin      does a written .py/.json/.toml/.ini file still parse?   [pure]
    detect       the `[checks]` that `gbr-node init` writes for a folder  [pure]
    diagnostics  a check's output -> errors; which ones a turn added      [pure]
    plan         check sets, targets, runs, format outcomes               [pure]
    verdict      a check set's verdict and how it is said                 [pure]
"""
