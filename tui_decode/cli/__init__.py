"""The command line: dispatch, the shared argument groups, `run`, `families`, `bench` and tables."""
