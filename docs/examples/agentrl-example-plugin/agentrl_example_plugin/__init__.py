"""The plugin-author guide's example plugin: arithmetic with a calculator tool."""
