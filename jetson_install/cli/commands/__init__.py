"""The commands' work, one module an area, as plain functions that take what the command line
parsed and return a result value; cli/main.py only parses, calls one of them and renders what
it returns."""
