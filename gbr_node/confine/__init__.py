"""OS confinement of the programs the node starts (GBR-CONF-01): Landlock on Linux,
with user, mount, pid, ipc and network namespaces where the kernel allows them.

- `CommandPolicy` (policy.py): what a command may read, write and reach.
- `support()` (support.py): which confinement this machine gives, found by a probe.
- `spawn()` (spawn.py): start a confined process through the launcher (launcher.py).

`tools.process.run_bounded(..., policy=...)` is the one way to run a confined
command with a time limit and an output cap; run_command and the write checks
use it.
"""

from gbr_node.confine.policy import CommandPolicy, Mode, for_commands
from gbr_node.confine.support import Support, in_force, support

__all__ = ["CommandPolicy", "Mode", "Support", "for_commands", "in_force", "support"]
