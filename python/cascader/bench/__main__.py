"""`python -m cascader.bench`: cascader against Vela on the models, accelerators and budgets of a grid."""

from .versus import main

raise SystemExit(main())
