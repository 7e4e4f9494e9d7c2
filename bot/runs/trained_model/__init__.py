"""A finished run's model: `try <prompt>` and *Try it* (with what trying may cost), and
*Checkpoints and export* (the checkpoints, the model chosen among them, the export to the
Hugging Face Hub, the download link)."""
