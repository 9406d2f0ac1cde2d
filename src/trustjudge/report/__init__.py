"""HTML reports drawn from audits: plots and tables, no judging (layer 5)."""
