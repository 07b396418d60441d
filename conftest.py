"""Root conftest, thin on purpose: the plugin is the installed `harness` package (entry point
`pytest11`). This file only keeps pytest from collecting `solutions/` on its own: hidden tests
are collected through their kata (see harness.plugin.KataDir), with the kata's context."""

collect_ignore = ["solutions", ".venv", "build"]
