"""compact-agent --demo: the real REPL against a scripted model on 127.0.0.1, in a throwaway sample project."""
