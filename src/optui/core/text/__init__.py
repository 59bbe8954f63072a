"""Text from outside, pure: made safe to show (safe_text), bytes into lines (textstream), JSON within bounds
(bounded_json), and cheap pseudo-random words for prompts and the demo (words)."""
