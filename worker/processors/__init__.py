"""Processors that ship with jobdesk."""
