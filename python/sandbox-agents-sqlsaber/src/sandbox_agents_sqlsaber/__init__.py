"""A sqlsaber-sandbox provider whose sandboxes are Sandbox Agents sessions.

    from sandbox_agents import AsyncClient
    from sqlsaber_sandbox import SandboxSession
    from sandbox_agents_sqlsaber import SandboxAgentsBackend

    async with AsyncClient(base_url=...) as client:
        backend = SandboxAgentsBackend(client, "analyst", environment="analysis")
        async with SandboxSession(model=..., backend=backend) as session:
            result = await session.analyze("...")
"""
from .backend import SandboxAgentsBackend

__all__ = ["SandboxAgentsBackend"]
