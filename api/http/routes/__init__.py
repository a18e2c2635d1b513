"""The app's route groups, one module per resource."""
