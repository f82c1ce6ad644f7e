"""The live course (`nox -s course`): code run by the Jupyter server and each page's kernel."""
