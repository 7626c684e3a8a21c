from loadcast.serve.predictor import Forecast, Predictor

__all__ = ["Forecast", "Predictor"]
