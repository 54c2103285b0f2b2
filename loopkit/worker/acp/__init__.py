"""loopkit as an Agent Client Protocol client: any agent that speaks ACP as a worker.

``client`` is the process lk-invoke starts for the ``acp`` provider: it starts the agent,
speaks JSON-RPC on the agent's stdio, answers its permission requests and file requests
from the contract's scope (``gate``), and prints one JSON line per message for the
provider's parser (``loopkit.worker.providers.acp``). ``agents`` names the known ACP agents.
"""
