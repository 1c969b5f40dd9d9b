"""pytest plugin: placeholder until the runner lands (inert)."""
