"""What the tests share: in-memory fakes of the ports (``tagpin.ports``) and constants. Each fake or
constant is defined here once; test modules import them instead of writing their own."""
