"""`picobot doctor`: `main` runs the checks of an install, `findings` is what
each check reports, `probe` asks the configured providers.
"""
