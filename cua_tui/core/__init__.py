"""The pure core: actions, policy, events, the supervisor, the audit log. No UI or vendor imports."""
