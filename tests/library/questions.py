"""The fixed question set of the library lookup (issue 18, STD-AI-01).

Written before the ranking was tuned, in the words a person would type, and
never edited to fit the ranking afterwards. Three kinds: "which class does X"
(what it is for, not its name), "what does F take" (the function named), and
"how do I ..." (the task, without the symbol's name). Each question lists the
definitions that answer it, as public import paths; a hit counts when its
qualified name (or one of its aliases) is one of them.
"""

QUESTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # -- which class / object does X
    ("which httpx class configures the connect, read, write and pool timeouts", ("httpx.Timeout",)),
    (
        "which trio class limits how many tasks can use something at the same time",
        ("trio.CapacityLimiter", "trio.Semaphore"),
    ),
    ("which rich class draws a table in the terminal", ("rich.table.Table",)),
    ("which pydantic class do my data models inherit from", ("pydantic.BaseModel",)),
    (
        "which exception does httpx raise when a response has an error status code",
        ("httpx.HTTPStatusError",),
    ),
    ("which rich class shows a progress bar", ("rich.progress.Progress",)),
    (
        "which prompt_toolkit class saves the input history to a file",
        ("prompt_toolkit.history.FileHistory",),
    ),
    ("which pydantic type holds a model's configuration", ("pydantic.ConfigDict",)),
    ("which h11 class is the state machine of an HTTP/1.1 connection", ("h11.Connection",)),
    ("which rich class renders markdown", ("rich.markdown.Markdown",)),
    ("which httpx class is the client for async code", ("httpx.AsyncClient",)),
    ("which trio exception means an operation took too long", ("trio.TooSlowError",)),
    ("which rich class draws a box with a border around some text", ("rich.panel.Panel",)),
    (
        "which pydantic class validates a value against a type that is not a model",
        ("pydantic.TypeAdapter",),
    ),
    ("which httpx transport answers requests with a function, for tests", ("httpx.MockTransport",)),
    (
        "which prompt_toolkit class completes words from a fixed list",
        ("prompt_toolkit.completion.WordCompleter",),
    ),
    ("which pydantic type hides a password when printed", ("pydantic.SecretStr",)),
    ("which rich class updates a display in place while the program runs", ("rich.live.Live",)),
    # -- what does F take
    ("what does httpx.get take", ("httpx.get",)),
    ("what arguments does trio.open_tcp_stream take", ("trio.open_tcp_stream",)),
    ("what does pydantic Field accept", ("pydantic.Field",)),
    ("what parameters does rich Console.print have", ("rich.console.Console.print",)),
    ("what does trio.to_thread.run_sync take", ("trio.to_thread.run_sync",)),
    (
        "what does PromptSession.prompt accept in prompt_toolkit",
        ("prompt_toolkit.PromptSession.prompt", "prompt_toolkit.shortcuts.PromptSession.prompt"),
    ),
    ("signature of pydantic model_validate", ("pydantic.BaseModel.model_validate",)),
    ("what does trio.move_on_after take", ("trio.move_on_after",)),
    ("what does httpx Client.stream take", ("httpx.Client.stream",)),
    ("arguments of hypothesis given", ("hypothesis.given",)),
    ("what does pytest.raises take", ("pytest.raises",)),
    ("what does regex.compile take", ("regex.compile",)),
    ("what does rich.print take", ("rich.print",)),
    ("what arguments does trio serve_tcp take", ("trio.serve_tcp",)),
    ("what does pydantic field_validator take", ("pydantic.field_validator",)),
    ("parameters of jsonschema validate", ("jsonschema.validate",)),
    ("what does pytest.approx take", ("pytest.approx",)),
    # -- how do I ... (no symbol named)
    (
        "how do I run a blocking function in a worker thread with trio",
        ("trio.to_thread.run_sync",),
    ),
    (
        "how do I give up on a block of code after some seconds in trio",
        ("trio.move_on_after", "trio.fail_after", "trio.move_on_at", "trio.fail_at"),
    ),
    (
        "how do I stream a response body with httpx without loading it all in memory",
        ("httpx.stream", "httpx.Client.stream", "httpx.AsyncClient.stream"),
    ),
    (
        "how do I validate a dict with a pydantic model",
        ("pydantic.BaseModel.model_validate", "pydantic.TypeAdapter.validate_python"),
    ),
    (
        "how do I turn a pydantic model into a json string",
        ("pydantic.BaseModel.model_dump_json",),
    ),
    (
        "how do I ask a yes or no question in prompt_toolkit",
        ("prompt_toolkit.shortcuts.confirm", "prompt_toolkit.shortcuts.yes_no_dialog"),
    ),
    (
        "how do I start several tasks at once and wait until they all finish in trio",
        ("trio.open_nursery",),
    ),
    (
        "how do I generate random integers as test inputs with hypothesis",
        ("hypothesis.strategies.integers",),
    ),
    (
        "how do I make sure only one task at a time touches a resource in trio",
        ("trio.Lock", "trio.StrictFIFOLock", "trio.Semaphore", "trio.CapacityLimiter"),
    ),
    (
        "how do I pretty print a nested python object with rich",
        ("rich.pretty.pprint", "rich.print"),
    ),
    ("how do I show source code with syntax highlighting in rich", ("rich.syntax.Syntax",)),
    (
        "how do I validate a json document against a schema",
        ("jsonschema.validate", "jsonschema.Draft202012Validator.validate"),
    ),
    (
        "how do I compare two version numbers",
        ("packaging.version.Version", "packaging.version.parse"),
    ),
    ("how do I escape square brackets in rich markup", ("rich.markup.escape",)),
    ("how do I catch ctrl-c and other signals in trio", ("trio.open_signal_receiver",)),
    ("how do I wait in one task until another task says it is done in trio", ("trio.Event",)),
    (
        "how do I encrypt and decrypt data with a symmetric key",
        ("cryptography.fernet.Fernet",),
    ),
    (
        "how do I bind a custom key to a function in prompt_toolkit",
        ("prompt_toolkit.key_binding.KeyBindings", "prompt_toolkit.key_binding.KeyBindings.add"),
    ),
    ("how do I use basic authentication with httpx", ("httpx.BasicAuth",)),
)
