"""System checks: a wrong setup (``configuration``), databases that cannot keep the
guarantees (``databases``) and schedules that do not parse (``schedules``). ``apps.py``
imports them, which registers them with Django's check framework.
"""
