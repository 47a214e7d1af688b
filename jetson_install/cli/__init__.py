"""The command line: parse options, call one function, render its result."""
