"""optui for coding agents: ``optui mcp``, an MCP server on a campaign.

- :mod:`optui.agent.cockpit` the campaign as an agent reads and edits it (status, GPUs,
  journal, experiments, todo list, notes; resources), in the shapes of the CLI's ``--json``,
  no MCP in it.
- :mod:`optui.agent.mcp_server` the MCP side: tools and resources over the cockpit (the
  official ``mcp`` SDK's MCPServer), bad arguments as tool errors that say what is wrong.
"""
