"""Thin views of the radiotherapy core: the Gymnasium env and its rendering."""
