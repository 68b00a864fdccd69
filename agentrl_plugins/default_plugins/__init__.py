"""The core's own components, registered through the same hooks as any plugin."""
