"""Key and palette actions that turn into session intents, one mixin per domain.

Long actions run as Textual workers (``exit_on_error=False``); failures become
notifications, never a crash. Destructive actions go through a confirm dialog with Cancel
focused, showing host, controller and the exact argv diff.
"""

from optui.ui.intents.bench import BenchIntents
from optui.ui.intents.journal import JournalIntents
from optui.ui.intents.rack import RackIntents
from optui.ui.intents.servers import ServerIntents
from optui.ui.intents.todo import TodoIntents

__all__ = ["BenchIntents", "JournalIntents", "RackIntents", "ServerIntents", "TodoIntents"]
