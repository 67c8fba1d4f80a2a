"""`picobot doctor`'s checks, shared by the CLI (gateway/cli/doctor) and the
console's Configuration view: `findings` (what a check found), `checks` (the
offline checks of a loaded config), `probe` (each provider's and channel's
API called once, with a short timeout)."""
