"""What the tests share and none of them is: builders, fake servers, the engine services spawned
engines host in tests, the hook harness and the hook process runner, the session-wide model."""
