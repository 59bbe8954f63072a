"""The todo list, pure: items (items), the experiment an item carries (experiment), agents' todo formats
(formats), and an agent's list merged with optui's (merge)."""
