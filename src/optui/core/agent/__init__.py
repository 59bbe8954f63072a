"""Agents, pure: answers sized for an agent (answers), an agent's requests, the operator's decisions and
their outcomes as journal events, and the [agent] restart policy (requests)."""
