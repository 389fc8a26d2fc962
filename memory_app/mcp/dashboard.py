from sessions_app.engine.contract import FeatureDashboard

DASHBOARD = FeatureDashboard()
