"""Reports: the report model, explanations, neighbourhood pictures, and the text, JSON and HTML renderers."""
