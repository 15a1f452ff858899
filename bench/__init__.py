"""Side-by-side benchmarks of threadloom against LangGraph (``python -m bench``)."""
