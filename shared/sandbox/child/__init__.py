"""Code that runs inside the sandbox (zygote, confinement, runner); stdlib only, never imports the project."""
