"""Tool/capability graph: edges derived from traces, kind weights, networkx metrics."""
