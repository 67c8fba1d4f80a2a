"""SKILL.md skills (DESIGN §2, §6): discovery, parsing, skill tools.

Reserved by the package layout; not implemented yet (no issue has asked for
it). Nothing imports this package.
"""
