"""Code that runs inside the sandbox (zygote, confinement, runner); stdlib only: from the project it imports shared.errors alone."""
