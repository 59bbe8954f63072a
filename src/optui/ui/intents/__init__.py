"""What the keys, the panels' messages and the palette ask for, carried out through the
session: one handler class per domain (:class:`~optui.ui.intents.base.Actions`), each held by
the app (composition, not mixins).

Long actions run as Textual workers (``exit_on_error=False``); failures become
notifications, never a crash. Destructive actions go through a confirm dialog with Cancel
focused, showing host, controller and the exact argv diff.
"""

from optui.ui.intents.bench import BenchActions
from optui.ui.intents.hosts import HostActions
from optui.ui.intents.journal import JournalActions
from optui.ui.intents.servers import ServerActions
from optui.ui.intents.todo import TodoActions

__all__ = ["BenchActions", "HostActions", "JournalActions", "ServerActions", "TodoActions"]
