"""`picobot doctor`: `main` runs the checks of an install and prints what
they found. The checks themselves (`checks`, `findings`, `probe`) live in
gateway.ops.doctor, where the console's Configuration view runs them too.
"""
